"""Every failure of a command becomes one line saying what failed and what to check.

The root group runs each command through ``Root.invoke``: click's own errors pass through,
anything else is described here and exits 1. With ``-v`` the traceback is printed too (for a
bug report); without it, never. Imports of the client happen only on the error path."""

from __future__ import annotations

import traceback

import click

UNREACHABLE_HINT = (
    "check that the API server runs and that the kubeconfig's server address is right "
    "(--kubeconfig, $KUBECONFIG, --context)"
)

REJECTED_HINT = (
    "check that the kubeconfig's certificate-authority is the CA that signed the API server's "
    "certificate, and that this CA is made as RFC 5280 says (Python 3.13 refuses a CA without "
    "a critical keyUsage of keyCertSign)"
)


def _kube_hint(status: int, reason: str) -> str:
    if reason == "CertificateRejected":
        return REJECTED_HINT
    if status == 0:
        return UNREACHABLE_HINT
    if status == 401:
        return "check the credentials of the kubeconfig's user (an expired token?)"
    if status == 403:
        return "check the RBAC of the kubeconfig's user"
    if status == 404:
        return "check -n/--namespace and that the CRDs are installed (`make install`)"
    return ""


def describe(e: BaseException) -> str:
    """One line for an exception a command did not turn into a click error itself."""
    import yaml

    from nodemanager.kube.errors import KUBE_ERRORS, KubeError, translate
    from nodemanager.kube.kubeconfig import KubeconfigError

    if isinstance(e, KUBE_ERRORS):
        e = translate(e)
    if isinstance(e, KubeconfigError):
        return str(e)
    if isinstance(e, KubeError):
        hint = _kube_hint(e.status, e.reason)
        return f"{e}; {hint}" if hint else str(e)
    if isinstance(e, OSError):
        where = f"{e.filename}: " if e.filename else ""
        return f"{where}{e.strerror or e}"
    if isinstance(e, yaml.YAMLError):
        return f"not valid YAML: {' '.join(str(e).split())}"
    if isinstance(e, ValueError):
        return str(e)
    return f"unexpected {type(e).__name__}: {e} (rerun with -v for the traceback and report it)"


def verbosity(ctx: click.Context) -> int:
    return int(ctx.find_root().meta.get("nodemanager.verbose", 0))


class Root(click.Group):
    """The root group: no traceback escapes a command."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise click.Abort() from None
        except Exception as e:
            if verbosity(ctx):
                traceback.print_exc()
            raise click.ClickException(" ".join(describe(e).split())) from e
