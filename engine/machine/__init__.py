"""This machine: its hardware snapshot, NVIDIA GPUs through NVML, live telemetry, CPU load and
ggml's devices.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "CpuContention": "cpu_load",
    "CpuMeter": "cpu_load",
    "CpuReading": "cpu_load",
    "contention": "cpu_load",
    "cores_taken": "cpu_load",
    "logical_cpus": "cpu_load",
    "physical_cores": "cpu_load",
    "read_cpu": "cpu_load",
    "share_between": "cpu_load",
    "BackendDevice": "devices",
    "DeviceType": "devices",
    "RemoteDevice": "devices",
    "NvmlSource": "gpu",
    "PynvmlSource": "gpu",
    "GpuInfo": "hardware",
    "HardwareSnapshot": "hardware",
    "cpu_name": "hardware",
    "describe": "hardware",
    "described_machine": "hardware",
    "ggml_gpus": "hardware",
    "take_snapshot": "hardware",
    "with_cpu_load": "hardware",
    "GpuSample": "telemetry",
    "Telemetry": "telemetry",
    "TelemetrySample": "telemetry",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
