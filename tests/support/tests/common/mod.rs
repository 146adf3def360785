//! A small custom resource for the e2e tests: `Widget`, with a status subresource and CEL rules, so the
//! tests exercise the same apiserver features the operator's `Proxy` CRD relies on.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "e2e.egressproxies.dev";
pub const FINALIZER: &str = "e2e.egressproxies.dev/cleanup";
pub const SIZE_RULE_MESSAGE: &str = "size must be between 1 and 10";
pub const COLOR_RULE_MESSAGE: &str = "color is immutable";

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "e2e.egressproxies.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    // The schema is written out by hand below, with the CEL rules under test.
    schema = "disabled"
)]
pub struct WidgetSpec {
    pub size: i64,
    pub color: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct WidgetStatus {
    pub phase: String,
}

/// The CRD for `Widget`: status subresource, a CEL range rule and a CEL transition rule.
pub fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("widgets.{GROUP}") },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": { "status": {} },
                "additionalPrinterColumns": [
                    { "name": "Size", "type": "integer", "jsonPath": ".spec.size" },
                    { "name": "Phase", "type": "string", "jsonPath": ".status.phase" },
                ],
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size", "color"],
                            "properties": {
                                "size": { "type": "integer" },
                                "color": {
                                    "type": "string",
                                    "x-kubernetes-validations": [
                                        { "rule": "self == oldSelf", "message": COLOR_RULE_MESSAGE },
                                    ],
                                },
                            },
                            "x-kubernetes-validations": [
                                { "rule": "self.size >= 1 && self.size <= 10", "message": SIZE_RULE_MESSAGE },
                            ],
                        },
                        "status": {
                            "type": "object",
                            "properties": { "phase": { "type": "string" } },
                        },
                    },
                }},
            }],
        },
    }))
    .expect("the Widget CRD is valid")
}

/// A widget as a test would apply it.
pub fn widget(name: &str, size: i64, color: &str) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            size,
            color: color.to_owned(),
        },
    )
}
