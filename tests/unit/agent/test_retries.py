from nodemanager.agent.retries import stable


def test_stable_removes_run_specific_paths():
    one = (
        "copy failed: /var/lib/nodemanager/runs/nodemanager-run-ab12cd34/tmp/"
        "ansible-tmp-1732370000.12-4242-123456789/AnsiballZ_copy.py: No space left on device"
    )
    two = (
        "copy failed: /var/lib/nodemanager/runs/nodemanager-run-zz99yy88/tmp/"
        "ansible-tmp-1732370555.98-4343-987654321/AnsiballZ_copy.py: No space left on device"
    )
    assert stable(one) == stable(two)
    assert stable(one) == "copy failed: <run dir>: No space left on device"
    assert stable("/etc/app/.motd.nm-tmp-k2j3h4g5 gone") == stable("/etc/app/.motd.nm-tmp-x gone")
