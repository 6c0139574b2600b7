//! The Studio HTTP surface, assembled: for now its router tests, which drive
//! every crate's routes through the one Studio router.

#[cfg(test)]
mod tests;
