//! The `meta.k8s.io` PartialObjectMetadata forms that metadata-only clients ask for
//! (client-go's metadata informers, kube-rs's metadata watchers and `Controller::owns`):
//! an object reduced to its metadata, a list to its items' metadata, in `v1` or in
//! `v1beta1` (which kube-apiserver still serves; its items are `v1beta1` too).

use serde_json::{Value, json};

use super::negotiate::MetaVersion;

/// `obj` as a `meta.k8s.io/v1` PartialObjectMetadata.
pub fn partial_object(obj: &Value) -> Value {
    partial_object_in(obj, MetaVersion::V1)
}

/// `obj` as a PartialObjectMetadata of `version`.
pub fn partial_object_in(obj: &Value, version: MetaVersion) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": version.api_version(),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A list of `items` as a PartialObjectMetadataList of `version`, with the list's own
/// `metadata` (resourceVersion, continue, remainingItemCount).
pub fn partial_list_in<'a>(
    items: impl Iterator<Item = &'a Value>,
    metadata: Value,
    version: MetaVersion,
) -> Value {
    let items: Vec<Value> = items.map(|i| partial_object_in(i, version)).collect();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": version.api_version(),
        "metadata": metadata,
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_metadata_is_left() {
        let obj = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a",
            "resourceVersion": "7"}, "data": {"k": "v"}});
        assert_eq!(
            partial_object(&obj),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "a", "resourceVersion": "7"}})
        );
        let metadata = json!({"resourceVersion": "9", "continue": "x"});
        let partial = partial_list_in([&obj].into_iter(), metadata.clone(), MetaVersion::V1);
        assert_eq!(partial["kind"], "PartialObjectMetadataList");
        assert_eq!(
            partial["metadata"],
            json!({"resourceVersion": "9", "continue": "x"})
        );
        assert_eq!(partial["items"][0]["kind"], "PartialObjectMetadata");
        assert!(partial["items"][0].get("data").is_none());
        let beta = partial_list_in([&obj].into_iter(), metadata, MetaVersion::V1Beta1);
        assert_eq!(beta["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(beta["items"][0]["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(
            partial_object_in(&obj, MetaVersion::V1Beta1)["apiVersion"],
            "meta.k8s.io/v1beta1"
        );
    }
}
