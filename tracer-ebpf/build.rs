//! Sets `--cfg bpf_target_arch="..."` (the architecture whose `pt_regs` the programs
//! read: the host's unless `AYA_BPF_TARGET_ARCH` says otherwise), as aya-ebpf does for
//! its own argument accessors; `llama_decode`'s stack-passed batch needs the stack
//! pointer register by name.

fn main() -> anyhow::Result<()> {
    println!(
        "cargo::rustc-check-cfg=cfg(bpf_target_arch, values(\"x86_64\", \"arm\", \"aarch64\", \"riscv64\", \"powerpc64\", \"s390x\", \"mips\", \"mips64\", \"loongarch64\"))"
    );
    aya_build::emit_bpf_target_arch_cfg()
}
