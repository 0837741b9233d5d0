"""Pages for people: the landing page, a version's report and a model's versions side by
side, rendered on the server from Jinja templates with the plots inlined as SVG.

Every page is one self-contained HTML document (styles inline, plots inline, no script,
no font, no request to any host) that reads the same saved to disk and printed. The
modules build the pages from registry records without FastAPI; ``app/routes/reports.py``
serves them.
"""
