"""Django's records, printed once.

Django's default logging (used when a project sets no LOGGING) gives the `django` logger a
console handler of its own, which prints to stderr while DEBUG is on, and lets each record
go on to the root logger, where the server's error log prints it again. For a project on
those defaults the server's log alone prints them; a project's own LOGGING is left as it is.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["print_django_records_once"]

DJANGO_CONSOLE = "console"  # the handler's name in Django's DEFAULT_LOGGING


def print_django_records_once() -> bool:
    """Drop Django's default console handler when the root logger prints too; True if so."""
    conf = sys.modules.get("django.conf")
    if conf is None or not conf.settings.configured or conf.settings.LOGGING:
        return False
    if not logging.getLogger().handlers:
        return False  # nothing else prints: Django's own handler is the only one
    django_log = logging.getLogger("django")
    kept = [handler for handler in django_log.handlers if handler.name != DJANGO_CONSOLE]
    if len(kept) == len(django_log.handlers):
        return False
    django_log.handlers = kept
    return True
