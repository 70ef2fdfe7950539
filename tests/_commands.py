"""The command line as the tests run it: one command in this process, its warnings
silenced, its status checked, and what it printed."""

import warnings

from skfedkt._cli._main import main


def run_command(argv, capsys, status=0):
    """What `argv` (any values, as strings) printed, once it returned `status`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        returned = main([str(a) for a in argv])
    printed = capsys.readouterr()
    assert returned == status, printed.err
    return printed.out + printed.err
