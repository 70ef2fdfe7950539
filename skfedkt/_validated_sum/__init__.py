"""The validated sum: each party's input is checked valid (counts in range, rows that add
up, bits) by two aggregators that must not collude, each seeing only a share of it, before
they add it; together they learn the sum and nothing else (Prio3 of draft-irtf-cfrg-vdaf).

- `_field`: the draft's prime fields as numpy arrays, and polynomials over their roots.
- `_circuits`: what makes an input valid, as arithmetic a proof checks on shares.
- `_flp`: the fully linear proof (Boneh et al., CRYPTO 2019) of one circuit.
- `_prio3`: a client's shares and proofs, each aggregator's check, with TurboSHAKE128.
- `_sums`: named arrays as what a party proves (ranges, fixed point, rows' totals), its
  reports to the two aggregators, each aggregator's check and total, the refusals.
- `_simulation`: one validated sum run in one process.
"""
