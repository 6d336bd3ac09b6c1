//! CEL validation rules (`x-kubernetes-validations`) of a custom resource's schema.
