"""A minimal Django project for tests/test_django.py: one app (shop) on PostgreSQL through
Django's psycopg 3 backend. The test sets QB_DJANGO_DATABASE_URL to its own database."""

import os
from urllib.parse import urlsplit

_u = urlsplit(os.environ["QB_DJANGO_DATABASE_URL"])

SECRET_KEY = "test-only"
USE_TZ = True
INSTALLED_APPS = ["djangoproject.shop"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _u.path.lstrip("/"),
        "USER": _u.username or "",
        "PASSWORD": _u.password or "",
        "HOST": _u.hostname or "",
        "PORT": str(_u.port or ""),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
