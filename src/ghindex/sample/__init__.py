"""The bundled sample (real GitHub data recorded by github3.py) and the offline demo on it."""
