import subprocess


def test_help_lists_commands(striker_bin):
    out = subprocess.run([str(striker_bin), "--help"], capture_output=True, text=True, check=True).stdout
    for cmd in ("serve", "perplexity", "make-model", "tokenize"):
        assert cmd in out


def test_unknown_command_fails(striker_bin):
    r = subprocess.run([str(striker_bin), "no-such-command"], capture_output=True, text=True)
    assert r.returncode != 0
