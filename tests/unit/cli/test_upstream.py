"""Upstream's agent flags (zachfi/nodemanager, Go `flag` syntax) start ours: mapped where they
mean something here, else dropped with one warning."""

from __future__ import annotations

from click.testing import CliRunner

from nodemanager.cli import main
from nodemanager.cli.upstream import translate


def test_go_syntax_is_mapped_or_dropped():
    ours, dropped = translate(
        ["-config.file=/etc/nodemanager/config.yaml", "--metrics-secure", "--leader-elect",
         "-kubeconfig", "/etc/nodemanager/kubeconfig", "-namespace=ns", "-log-level", "INFO",
         "--zap-encoder=console", "-configset.reconcile-period=1h", "--zap-devel=false",
         "-managednode.drain-timeout", "2m", "--enable-http2", "-n", "x"]
    )  # fmt: skip
    assert ours == [
        "--leader-elect=true",
        "--kubeconfig=/etc/nodemanager/kubeconfig",
        "--namespace=ns",
        "--log-level=info",
        "--log-format=text",
        "--drift-check-interval=1h",
        "--drain-timeout=2m",
        "-n",  # ours, left alone
        "x",
    ]
    assert dropped == ["-config.file", "--metrics-secure", "--zap-devel", "--enable-http2"]


def test_a_bool_flag_never_takes_the_next_argument_but_ours_took_true():
    assert translate(["--leader-elect", "run"]) == (["--leader-elect=true", "run"], [])
    assert translate(["--leader-elect", "false"]) == (["--leader-elect=false"], [])


def test_values_we_cannot_map_are_dropped_with_the_flag():
    assert translate(["--zap-log-level=3"]) == ([], ["--zap-log-level"])
    assert translate(["--", "-namespace"]) == (["--", "-namespace"], [])


def test_an_upstream_unit_file_starts_the_agent(tmp_path):
    """Upstream's ExecStart with its extra flags reaches the agent: the one warning, then the
    agent reading the kubeconfig named by the single-dash -kubeconfig."""
    bad = tmp_path / "kubeconfig"
    bad.write_text("- not a kubeconfig\n")
    result = CliRunner().invoke(
        main,
        ["-config.file=/etc/nodemanager/nodemanager.yaml", "--metrics-secure", "--leader-elect",
         "-kubeconfig", str(bad), "--state-dir", str(tmp_path / "state")],
        catch_exceptions=False,
    )  # fmt: skip
    warning, error = result.stderr.splitlines()
    assert warning.startswith("warning: ignoring upstream nodemanager flags")
    assert "-config.file, --metrics-secure" in warning
    assert error.startswith(f"Error: kubeconfig {bad} is not a kubeconfig")
    assert result.exit_code == 1
