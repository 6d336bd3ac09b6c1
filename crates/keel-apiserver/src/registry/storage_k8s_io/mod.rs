//! storage.k8s.io/v1: StorageClasses, CSIDrivers, CSINodes and VolumeAttachments (a delete of
//! each answers the deleted object, as their upstream REST storage sets `ReturnDeletedObject`), with the
//! small field helpers ([`fields`]) the other groups' kinds share.

pub mod csi_drivers;
pub mod csi_nodes;
pub mod fields;
pub mod storage_classes;
pub mod volume_attachments;

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![
        &csi_drivers::CsiDrivers,
        &csi_nodes::CsiNodes,
        &storage_classes::StorageClasses,
        &volume_attachments::VolumeAttachments,
    ]
}
