"""Drive a DoFn by hand the way a Beam runner does, for tests that check one DoFn alone."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.utils.windowed_value import WindowedValue


def _value(out):
    return out.value if isinstance(out, WindowedValue) else out


def bundle(fn: beam.DoFn, *elements) -> list:
    """The outputs of one bundle: ``start_bundle``, ``process`` for each element, then
    ``finish_bundle``, in order; values a DoFn emits as WindowedValue (outputs of an earlier
    element, or from ``finish_bundle``) are unwrapped, TaggedOutput kept with its value unwrapped."""
    outs = []
    if hasattr(fn, "start_bundle"):
        fn.start_bundle()
    for element in elements:
        outs.extend(fn.process(element))
    outs.extend(fn.finish_bundle() or [])
    return [beam.pvalue.TaggedOutput(o.tag, _value(o.value))
            if isinstance(o, beam.pvalue.TaggedOutput) else _value(o) for o in outs]
