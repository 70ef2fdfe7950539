"""The package's version, in a module of its own: the upload protocol writes it into
every manifest without importing the package root."""

__version__ = "0.1.0"
