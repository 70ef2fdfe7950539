"""What connects a party's machine to the server's, for every algorithm.

- `_protocol`: the party's data checks and manifest, and
  the server's checks of the uploads it collects.
- `_upload`: the upload file (a JSON manifest and a skops payload), checked before it
  is loaded, never unpickled.
- `_cli`: the ``skfedkt split``, ``party``, ``server`` and ``score`` commands.
"""
