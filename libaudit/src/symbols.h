/* SPDX-License-Identifier: MIT */
/*
 * Internal functions shared between translation units carry the auditlog__
 * prefix in the object code, so that the static library (which cannot hide
 * them) never puts a short name like al_parse into a program's namespace.
 * Sources keep the short names. Every internal header includes this first.
 */
#ifndef AUDITLOG_SYMBOLS_H
#define AUDITLOG_SYMBOLS_H
#define al_chain_append auditlog__al_chain_append
#define al_chain_append_decoded auditlog__al_chain_append_decoded
#define al_chain_step_inplace auditlog__al_chain_step_inplace
#define al_check_hash auditlog__al_check_hash
#define al_ckm_count auditlog__al_ckm_count
#define al_ckm_names auditlog__al_ckm_names
#define al_ckr_count auditlog__al_ckr_count
#define al_ckr_names auditlog__al_ckr_names
#define al_decode_field auditlog__al_decode_field
#define al_decode_text auditlog__al_decode_text
#define al_decoded_max auditlog__al_decoded_max
#define al_emit auditlog__al_emit
#define al_encode_v1 auditlog__al_encode_v1
#define al_escaped_len auditlog__al_escaped_len
#define al_field_key auditlog__al_field_key
#define al_file_open auditlog__al_file_open
#define al_file_switch auditlog__al_file_switch
#define al_format_header auditlog__al_format_header
#define al_format_ts auditlog__al_format_ts
#define al_format_ts_cached auditlog__al_format_ts_cached
#define al_hex auditlog__al_hex
#define al_put_dec auditlog__al_put_dec
#define al_verify_add_path auditlog__al_verify_add_path
#define al_verify_note_dir auditlog__al_verify_note_dir
#define al_rotated_name auditlog__al_rotated_name
#define al_verify_files auditlog__al_verify_files
#define al_vresult_free auditlog__al_vresult_free
#define al_vstream_end auditlog__al_vstream_end
#define al_vstream_feed auditlog__al_vstream_feed
#define al_vstream_free auditlog__al_vstream_free
#define al_vstream_new auditlog__al_vstream_new
#define al_registry_chains auditlog__al_registry_chains
#define al_registry_compare auditlog__al_registry_compare
#define al_registry_free auditlog__al_registry_free
#define al_registry_load auditlog__al_registry_load
#define al_witness_parse auditlog__al_witness_parse
#define al_witness_free auditlog__al_witness_free
#define al_pread_full auditlog__al_pread_full
#define al_vpool_cpus auditlog__al_vpool_cpus
#define al_vpool_free auditlog__al_vpool_free
#define al_vpool_new auditlog__al_vpool_new
#define al_vpool_next auditlog__al_vpool_next
#define al_vpool_peek auditlog__al_vpool_peek
#define al_vpool_start auditlog__al_vpool_start
#define al_vpool_stop auditlog__al_vpool_stop
#define al_vclass_name auditlog__al_vclass_name
#define al_vclass_is_integrity auditlog__al_vclass_is_integrity
#define al_now_ns auditlog__al_now_ns
#define al_p11_find auditlog__al_p11_find
#define al_p11_lookup auditlog__al_p11_lookup
#define al_parse auditlog__al_parse
#define al_parse_ts auditlog__al_parse_ts
#define al_random_id auditlog__al_random_id
#define al_read_hooked auditlog__al_read_hooked
#define al_record_decode auditlog__al_record_decode
#define al_ts_ns auditlog__al_ts_ns
#define al_type_name auditlog__al_type_name
#define al_unhex auditlog__al_unhex
#define al_utf8_seq auditlog__al_utf8_seq
#define al_write_sync auditlog__al_write_sync
#endif
