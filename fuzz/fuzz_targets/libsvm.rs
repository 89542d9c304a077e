#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slide_fuzz::check_libsvm(data));
