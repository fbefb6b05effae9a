"""``contrib demo``: the whole loop told offline on a generated mini upstream."""
