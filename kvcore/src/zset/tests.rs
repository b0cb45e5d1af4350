//! Property tests of [`ZSet`] against a model, under both encodings.
