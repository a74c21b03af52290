//! Placeholder: the PostgreSQL throughput bench is written in a later commit.
fn main() {}
