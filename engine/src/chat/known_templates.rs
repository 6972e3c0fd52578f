//! Published chat templates, verbatim, for generated models (`engine gen-model` writes
//! the one matching each preset's vocabulary, so chat works without a real model).

/// Llama 2 chat (`meta-llama/Llama-2-7b-chat-hf`): `[INST]` turns, `<<SYS>>` system
/// block, BOS before each user turn, EOS after each answer; rejects roles that do not
/// alternate.
pub const LLAMA2: &str = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

/// Llama 3 instruct (`meta-llama/Meta-Llama-3-8B-Instruct`): header-delimited turns
/// ending in `<|eot_id|>`, BOS written by the template.
pub const LLAMA3: &str = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

/// ChatML (`<|im_start|>role\n...<|im_end|>\n`), as llama.cpp writes it.
pub const CHATML: &str = super::template::CHATML_TEMPLATE;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::template::{ChatTemplate, Message, Role, TemplateOrigin};

    fn render(source: &str, messages: &[Message], add: bool) -> Result<String, String> {
        ChatTemplate::new(source, TemplateOrigin::Model, "<s>".into(), "</s>".into())
            .and_then(|t| t.render(messages, add))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn llama2_renders_system_user_and_assistant_turns() {
        let messages = [
            Message::new(Role::System, "Be brief."),
            Message::new(Role::User, " Hi "),
            Message::new(Role::Assistant, "Hello."),
            Message::new(Role::User, "Bye"),
        ];
        assert_eq!(
            render(LLAMA2, &messages, true).expect("renders"),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST] Hello. </s><s>[INST] Bye [/INST]"
        );
        let bad = [Message::new(Role::Assistant, "first")];
        let e = render(LLAMA2, &bad, true).expect_err("roles must alternate");
        assert!(e.contains("roles must alternate"), "{e}");
    }

    #[test]
    fn llama3_trims_content_and_opens_the_assistant_header() {
        let messages = [Message::new(Role::User, " Hi\n")];
        assert_eq!(
            render(LLAMA3, &messages, true).expect("renders"),
            "<s><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        );
    }
}
