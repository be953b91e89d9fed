"""The ground floor: plain value types every other part of core is written with.

Records, keys, the candidate list, observer events, compile targets and the
search geometry import nothing of core above :mod:`kerneltune.core.errors`,
so any stage, plugin seam or driver can use them without an arrow back up.
Plugin authors take these names from :mod:`kerneltune.core`.
"""
