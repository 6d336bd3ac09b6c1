//! autoscaling/v2 and v1: HorizontalPodAutoscalers.

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    Vec::new()
}
