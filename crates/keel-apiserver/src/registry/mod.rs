//! The registry: what each resource kind is (scope, validation, defaulting, table columns,
//! field selectors, subresources), one file per kind behind one trait. It starts with the
//! rules every kind shares: [`names`].

pub mod names;
