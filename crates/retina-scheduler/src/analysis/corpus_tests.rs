//! SQL analysis corpus (filled below).
