"""The web: HTML pages, the JSON API, badges and the upload endpoint (FastAPI + Jinja2)."""
