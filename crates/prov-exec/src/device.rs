//! The device a libtorch stage computes on: `device: cpu | cuda:N` in its parameters, made
//! explicit in the lockfile by `prov lock` (so a lockfile always names it), and never picked
//! by what the machine has. The device is in the stage key (through the configuration and the
//! envelope); a CUDA stage's envelope also carries its GPU's facts.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a stage computes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ComputeDevice {
    /// The CPU (the default).
    #[default]
    Cpu,
    /// CUDA device N, as the process that computes numbers them (`CUDA_VISIBLE_DEVICES`
    /// applies; `prov` pins `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    Cuda(u32),
}

/// A device name that is neither `cpu` nor `cuda:N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected `cpu` or `cuda:N` (N a device index, from 0), got `{0}`")]
pub struct DeviceError(pub String);

impl FromStr for ComputeDevice {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "cpu" {
            return Ok(Self::Cpu);
        }
        let index = s.strip_prefix("cuda:").filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        // Digits only: no sign, no spaces, and no leading zeros, so that each device has one
        // spelling (and one stage key).
        match index {
            Some(n) if n == "0" || !n.starts_with('0') => n.parse().map(Self::Cuda).map_err(|_| DeviceError(s.into())),
            _ => Err(DeviceError(s.to_owned())),
        }
    }
}

impl fmt::Display for ComputeDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl Serialize for ComputeDevice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ComputeDevice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_have_one_spelling_each() {
        assert_eq!("cpu".parse::<ComputeDevice>().unwrap(), ComputeDevice::Cpu);
        assert_eq!("cuda:0".parse::<ComputeDevice>().unwrap(), ComputeDevice::Cuda(0));
        assert_eq!("cuda:12".parse::<ComputeDevice>().unwrap(), ComputeDevice::Cuda(12));
        for bad in ["gpu", "cuda", "cuda:", "cuda:-1", "cuda:+1", "cuda:01", "cuda: 1", "CPU", "cuda:99999999999"] {
            let e = bad.parse::<ComputeDevice>().unwrap_err();
            assert!(e.to_string().contains("`cpu` or `cuda:N`"), "{bad}: {e}");
        }
        for d in [ComputeDevice::Cpu, ComputeDevice::Cuda(3)] {
            assert_eq!(d.to_string().parse::<ComputeDevice>().unwrap(), d);
            assert_eq!(serde_json::to_value(d).unwrap(), serde_json::Value::String(d.to_string()));
        }
    }
}
