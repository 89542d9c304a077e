#![no_main]

use std::sync::OnceLock;

static NETWORK: OnceLock<slide::NetworkConfig> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let network = NETWORK.get_or_init(slide_fuzz::tiny_network);
    slide_fuzz::check_checkpoint(data, network);
});
