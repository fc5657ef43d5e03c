"""The release this client belongs to: the ``dummynet`` binary it starts
must be the same release (the crate's version, ``Cargo.toml``)."""

__version__ = "0.1.0"
