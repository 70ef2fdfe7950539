"""The order of the gallery: the quickstart first, then the examples by file name."""

from sphinx_gallery.sorting import FileNameSortKey


class QuickstartFirst(FileNameSortKey):
    """Sort key that puts ``plot_quickstart.py`` before every other example."""

    def __call__(self, filename):
        return (str(filename) != "plot_quickstart.py", super().__call__(filename))
