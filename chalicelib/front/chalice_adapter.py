"""The one place that patches Chalice (1.34, pinned in requirements.txt).

Chalice answers an exception a view raises with its own ``{"Code", "Message"}`` 500 before
any middleware sees it, unless the exception is a ``ChaliceUnhandledError``. Our errors
(core/errors.py) know nothing of Chalice, so instead of subclassing its class we wrap each
view call in ``RestAPIEventHandler._get_view_function_response``: an exception the view raises
travels to the middleware inside ``ViewFailed`` (a ``ChaliceUnhandledError``, which that method
re-raises), and the middleware unwraps it and answers through the one last-resort mapping
(core/last_resort.py). Chalice's own view errors (``ChaliceViewError``: its 400 for a body it
cannot parse, ...) keep their path; the middleware reshapes their body.

What this relies on, checked by tests/unit/test_chalice_adapter.py (it fails when Chalice
changes under it): the method's name and signature ``(self, view_function, function_args)``,
that it calls ``view_function(**function_args)``, re-raises ``ChaliceUnhandledError`` and turns
``ChaliceViewError`` into a response. See docs/architecture.md "The request path".
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalice.app import ChaliceUnhandledError, ChaliceViewError, RestAPIEventHandler

CHALICE_VERSION = '1.34.0'   # the version this module was checked against (requirements.txt)


class ViewFailed(ChaliceUnhandledError):
    """Carries an exception a view raised past Chalice, to the middleware."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def unwrap(exc: BaseException) -> BaseException:
    """The exception a view raised, whether or not it travelled inside ``ViewFailed``."""
    return exc.original if isinstance(exc, ViewFailed) else exc


def _guarded(view_function: Callable[..., Any]) -> Callable[..., Any]:
    def call(**kwargs: Any) -> Any:
        try:
            return view_function(**kwargs)
        except ChaliceViewError:
            raise   # Chalice's own 4xx: it answers them, the middleware reshapes the body
        except Exception as exc:  # noqa: BLE001 - every other error goes to the middleware
            raise ViewFailed(exc) from exc
    return call


def install() -> None:
    """Wrap ``RestAPIEventHandler._get_view_function_response`` once (idempotent)."""
    chalice_view_response = RestAPIEventHandler._get_view_function_response
    if getattr(chalice_view_response, 'platform_wrapped', False):
        return

    def view_response(self, view_function, function_args):
        return chalice_view_response(self, _guarded(view_function), function_args)
    view_response.platform_wrapped = True
    view_response.chalice_original = chalice_view_response
    RestAPIEventHandler._get_view_function_response = view_response
