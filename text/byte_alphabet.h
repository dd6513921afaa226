// GPT-2's byte alphabet: each of the 256 byte values spelled as one printable Unicode character.
//
// A byte-level BPE works on bytes, but its vocabulary file (vocab.json) and merges file (merges.txt)
// are text, one token per JSON key and two per line. Control bytes, spaces and the bytes of a
// half-written UTF-8 character would make those files unreadable, or ambiguous where a merge line
// splits at its space. So GPT-2 writes every byte as a character: the 188 printable bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') as the Latin-1 character of the same value, the 68 others (controls, space,
// DEL, the no-break space, the soft hyphen) as U+0100, U+0101, ... in byte order — so a space is
// 'Ġ' (U+0120) and a newline 'Ċ' (U+010A). A token's text in vocab.json is the UTF-8 of the
// characters of its bytes: the token " the" is "Ġthe".
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace brigade::text {

// The character that stands for `byte`.
uint32_t byte_to_code_point(uint8_t byte);

// The byte that `code_point` stands for, or nothing when it is not one of the 256 characters.
std::optional<uint8_t> code_point_to_byte(uint32_t code_point);

// The alphabet's spelling of `bytes`: the UTF-8 of one character per byte.
std::string bytes_to_symbols(std::string_view bytes);

// The bytes that `symbols` spells, or nothing when it is not valid UTF-8 or holds a character
// outside the alphabet.
std::optional<std::string> symbols_to_bytes(std::string_view symbols);

// The bytes in GPT-2's order: the printable ones in increasing order, then the others in increasing
// order. GPT-2's vocabulary gives the single-byte tokens ids 0..255 in this order ('!' is 0, 'Ġ' 220),
// and so does train_bpe (text/train.h).
const std::array<uint8_t, 256>& bytes_in_alphabet_order();

}  // namespace brigade::text
