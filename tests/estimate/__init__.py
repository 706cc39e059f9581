"""Tests of the estimator (gpuyield.estimate and `gpuyield estimate`)."""
