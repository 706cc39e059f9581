"""The page template escapes every value it is given; only the CSS and the charts are markup."""

from __future__ import annotations

from gpuyield.report.page_model import (
    Cell,
    Figure,
    Keyed,
    Kpi,
    Note,
    Page,
    Row,
    Section,
    Table,
    TableGroup,
    render,
)

EVIL = "<script>alert('x')</script>&\""
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;&quot;"


def _page(text: str) -> Page:
    cell = Cell(text=text, keyed=Keyed(key=text, value=text), num=True)
    rows = (Row(cells=(cell,), css_class="sub"),) * 30
    table = Table(caption=text, headers=(text,), rows=rows, folded=True)
    return Page(
        title=text,
        css='body { font-family: "Segoe UI"; }\n',
        headline=cell,
        kpis=(Kpi(label=text, text=text, keyed=Keyed(key="k", value=text)),),
        warnings=(cell,),
        sections=(
            Section(
                section_id="where",
                title=text,
                figure=Figure(
                    chart_id="where", title=text, svg='<svg role="img"></svg>', caption=text
                ),
                blocks=(TableGroup(tables=(table,)),),
            ),
            Section(section_id="quality", title=text, figure=None, blocks=(Note(text=text), table)),
        ),
        version=text,
        window=(text, text),
    )


def test_every_value_is_escaped() -> None:
    page = render(_page(EVIL))
    assert "<script" not in page
    # title, headline, kpi, warning, nav, section titles, aria-label, caption, tables, note, footer
    assert page.count(ESCAPED) >= 12
    # data-value holds the JSON of the value, escaped as an attribute.
    assert 'data-value="&quot;&lt;script&gt;' in page


def test_trusted_markup_passes_through() -> None:
    page = render(_page("plain"))
    assert 'font-family: "Segoe UI";' in page  # the CSS file is ours
    assert '<svg role="img" aria-label="plain"></svg>' in page  # matplotlib's chart
    # A folded table sits in <details>; the note is a muted paragraph.
    assert "<details><summary>plain: 30 rows</summary>" in page
    assert '<p class="gy-note">plain</p>' in page
