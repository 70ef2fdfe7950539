"""What a coordinator that deviates forwards: another message's shares, as the
routed entry a holder receives."""


def routed_from(shares_message, holder):
    """The routed entry of `holder` made from a dealer's ``shares`` message: its box
    sealed for `holder` and the digests it signed for `holder`."""
    return dict(sealed=shares_message["sealed"][holder],
                digests=shares_message["digests"][holder])
