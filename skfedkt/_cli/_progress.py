"""Progress where a person watches, lines where a log records: a command's progress
is a bar on a terminal (tqdm), and plain lines, one per stage, where its stderr goes to
a file or a pipe (a scheduler's log, CI), which would keep every refresh of a bar."""

import sys
import time


# the widest stage a progress bar shows beside its own fields on a terminal line
BAR_STAGE_WIDTH = 48


def on_a_terminal(stream):
    """Whether `stream` is a terminal a person watches."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class StageLines:
    """A progress bar's interface (``set_description``, ``set_postfix_str``,
    ``update``, ``close``) that writes one plain line per stage to `stream`:
    ``"<what>: <stage>"``, and after each unit of work ``"<what>: done (<n>/<total>,
    <seconds> s)"``."""

    def __init__(self, what="", total=None, stream=None):
        self.what, self.total = what, total
        self.stream = sys.stderr if stream is None else stream
        self.start, self.n, self.stage = time.perf_counter(), 0, None

    def _line(self, text):
        print(f"{self.what}: {text}", file=self.stream, flush=True)

    def set_description(self, what):
        self.what, self.stage = what, None

    def set_postfix_str(self, stage):
        if stage and stage != self.stage:
            self._line(stage)
        self.stage = stage

    def update(self, n=1):
        self.n += n
        of = "" if self.total is None else f"/{self.total}"
        self._line(f"done ({self.n}{of}, {time.perf_counter() - self.start:.1f} s)")

    def close(self):
        pass


def shortened(text, width=BAR_STAGE_WIDTH):
    """`text` in at most `width` characters, cut after a whole word: a stage as a bar
    on a terminal shows it (a log's `StageLines` keep it whole)."""
    if len(text) <= width:
        return text
    return text[: width - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"
