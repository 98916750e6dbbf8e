//! HTTP sources (placeholder; the axum routes come next).
