"""Helpers shared by the test modules, one module per thing they build or drive.

Test modules import from here and never from one another: a helper that lives in a test module ties every
importer to that module's fixtures, collection and name. Fixtures stay in conftest.py files, where pytest finds
them; the plain functions and classes they use live here. tests/test_layout.py keeps it that way."""
