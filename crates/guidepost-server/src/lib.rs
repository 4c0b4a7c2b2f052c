//! The Guidepost HTTP server (in progress).
