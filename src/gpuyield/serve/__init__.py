"""`gpuyield serve`: Prometheus metrics, the report as JSON and HTML, collections on a schedule.

Needs the ``serve`` extra (``pip install 'gpuyield[serve]'``): prometheus-client, Starlette, uvicorn.
"""

from gpuyield.serve.server import Listen, check_listen, read_token, serve
from gpuyield.serve.state import ServeSettings, ServeState

__all__ = ["Listen", "ServeSettings", "ServeState", "check_listen", "read_token", "serve"]
