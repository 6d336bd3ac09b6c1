//! The `meta.k8s.io/v1` PartialObjectMetadata forms that metadata-only clients ask for
//! (client-go's metadata informers, kube-rs's metadata watchers and `Controller::owns`):
//! an object reduced to its metadata, a list to its items' metadata.

use serde_json::{Value, json};

/// `obj` as a PartialObjectMetadata.
pub fn partial_object(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// `list` as a PartialObjectMetadataList (the list's own metadata kept: resourceVersion,
/// continue, remainingItemCount).
pub fn partial_list(list: &Value) -> Value {
    let items: Vec<Value> = list["items"]
        .as_array()
        .map(|items| items.iter().map(partial_object).collect())
        .unwrap_or_default();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list.get("metadata").cloned().unwrap_or_else(|| json!({})),
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
        let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "9", "continue": "x"}, "items": [obj]});
        let partial = partial_list(&list);
        assert_eq!(partial["kind"], "PartialObjectMetadataList");
        assert_eq!(
            partial["metadata"],
            json!({"resourceVersion": "9", "continue": "x"})
        );
        assert_eq!(partial["items"][0]["kind"], "PartialObjectMetadata");
        assert!(partial["items"][0].get("data").is_none());
    }
}
