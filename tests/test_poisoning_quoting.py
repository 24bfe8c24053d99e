"""Answers that quote the knowledge base are not contradicted by it: a claim the KB says word for
word is supported, a numbered step is not another value of the step before it, two counts of
different things are not one slot, a list's marker states nothing, and code is not a statement. On
ShareGPT answers quoting their own documents (bench/poisoning.py --quoting) these were 2.7 % of
paragraphs blocked, now 0.1 %.
What is really another value of the same thing is still contradicted."""

from __future__ import annotations

import pytest

from ctxwarden.policies.poisoning.assess import opens_list, outside_code, says_something
from ctxwarden.policies.poisoning.checkers.base import CONTRADICTED, SUPPORTED, Evidence
from ctxwarden.policies.poisoning.checkers.local import _quoting
from ctxwarden.policies.text.counted import COUNT, LABEL, number_reading, same_slot
from ctxwarden.policies.text.slots import slots
from tests.conftest import openai_client
from tests.poisoning_fixtures import local_judge
from tests.test_poisoning_e2e import ADMIN_KEY, ask, load_kb, poisoning

STEPS = ("Step 3: Slowly bring your knees up toward your chest and grab them with your hands. "
         "Step 4: Engage your glutes and move your knees outward about 45 degrees.")
TOWER = "The Eiffel Tower has 1,665 steps to the top. It has 3 lifts and a restaurant on the second floor."
SERVER = {"id": "server", "text": "The billing server listens on port 8080 and keeps 3 worker processes."}
CODE_ANSWER = ("Start it like this:\n\n```c\nint port = 9090;\nint workers = 12;\nlisten(fd, 3);\n```\n\n"
               "Then open the page in a browser.")


@pytest.fixture(autouse=True)
def admin_key(monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)


def _says(passage: str, claim: str) -> bool:
    return _quoting(claim, [Evidence("doc#0", "doc", passage, passage, 1.0)]) is not None


def passes_whole(client, question: list, answer: str, stream: bool) -> bool:
    """The fake's `answer` reaches the client whole and unblocked, streamed or not."""
    if stream:
        return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="gpt-4o", messages=question, stream=True) if c.choices) == answer
    completion, headers = ask(client, messages=question)
    return "poisoning.blocked" not in headers["x-ctxwarden-actions"] and completion.choices[0].message.content == answer


def number(text: str):
    return next(s for s in slots(text) if s.kind == "number")


@pytest.mark.parametrize("text, kind, word", [
    ("Step 3: bring your knees up.", LABEL, "step"),
    ("She stayed in Room 101 all week.", LABEL, "room"),
    ("It has 440 specialty stores, cafes and more.", COUNT, "stor"),
    ("About 45 degrees.", COUNT, "degre"),
    ("The population was 743 at the census.", COUNT, None),
    ("Nearly 300 people came.", COUNT, "people"),  # an adverb before a number is not its label
])
def test_what_a_plain_number_stands_for_is_read_from_the_words_beside_it(text, kind, word):
    read, counted = number_reading(text, number(text))
    assert read == kind and (word in counted if word else not counted)


def test_only_counts_of_the_same_thing_are_one_slot():
    def same(a: str, b: str) -> bool:
        return same_slot(number(a), a, number(b), b)

    assert same("It has 1,710 steps.", "It has 1,665 steps to the top.")
    assert same("Over 450 stores are there.", "It has 440 specialty stores.")
    assert same("A population of 730.", "The population was 743 at the census.")  # one of them counts nothing named
    assert not same("It has 45 floors.", "It has 3 lifts.")
    assert not same("Step 4: engage your glutes.", "Step 3: bring your knees up.")
    assert same("It is 330 m tall.", "It is 300 m tall.")  # with a unit: its dimension decides (slots.py)


def test_a_claim_the_kb_says_word_for_word_is_supported_and_a_longer_number_is_not_the_same_words():
    assert _says("Run it with `if (listen(server_fd, 3) < 0)` first.", "if (listen(server_fd, 3) < 0)")
    assert _says("The Eiffel Tower is located in Paris, France.", "the eiffel  tower is located in Paris.")
    assert not _says("The meeting is at 3:30 today.", "The meeting is at 3")
    assert not _says("It was built in 1990.", "It was built in 19")


def test_quoted_steps_and_counts_of_other_things_pass_and_real_contradictions_still_block():
    judge = local_judge({"steps": STEPS, "tower": TOWER})
    quoted = judge("Step 4: Engage your glutes and move your knees outward about 45 degrees.", "What do I do next?")
    assert quoted.label == SUPPORTED
    other_step = judge("Step 5: Engage your glutes and move your knees outward about 45 degrees.")
    assert other_step.label != CONTRADICTED or other_step.confidence < 0.8
    assert judge("The Eiffel Tower has 45 floors.", "How many floors does the Eiffel Tower have?").label != CONTRADICTED
    wrong = judge("The Eiffel Tower has 1,710 steps to the top.", "How many steps does the Eiffel Tower have?")
    assert wrong.label == CONTRADICTED and wrong.confidence >= 0.8 and wrong.kind == "wrong_number"


def test_a_lists_marker_states_nothing_but_an_answers_opening_number_answers_the_question():
    assert not says_something("2.") and not says_something("}") and not says_something("(3)")
    assert says_something("It has 3 lifts.") and says_something("int opt = 1;")
    assert opens_list("1. Open the app.\n2. Tap Settings.") and opens_list("1) Open it.\n  2) Close it.")
    assert opens_list("1. ") and opens_list("1. Only this.")  # a stream's first piece; a one-item list
    assert not opens_list("2015. The Fault in Our Stars came out that year.") and not opens_list("1.")


@pytest.mark.parametrize("stream", [False, True])
def test_through_the_server_an_answer_opening_with_a_numbered_list_is_not_judged_by_its_first_marker(
        fake, start_proxy, stream):
    """Streamed, the first piece judged is "1. " alone: the "2." that shows a list comes later."""
    proxy = start_proxy(poisoning())
    load_kb(proxy, [SERVER])
    client = openai_client(proxy)
    answer = "1. Open the billing console.\n2. Press restart and wait a minute."
    question = [{"role": "user", "content": "How do I restart the billing server?"}]
    fake.reply(content=answer)
    assert passes_whole(client, question, answer, stream)
    fake.reply(content="1. The billing server listens on port 9090.\n2. It keeps 3 worker processes.")
    _, headers = ask(client, messages=[{"role": "user", "content": "Which port does the billing server listen on?"}])
    assert "poisoning.blocked" in headers["x-ctxwarden-actions"]  # the list's claims are still judged


def test_through_the_server_an_answer_quoting_the_kbs_numbered_steps_passes(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy, [{"id": "steps", "text": STEPS}, {"id": "tower", "text": TOWER}])
    client = openai_client(proxy)
    fake.reply(content="Here is the routine:\n\n1. Step 4: Engage your glutes and move your knees outward about 45 degrees.\n"
                       "2. Step 3: Slowly bring your knees up toward your chest and grab them with your hands.")
    completion, headers = ask(client, messages=[{"role": "user", "content": "What are steps 3 and 4?"}])
    assert "poisoning.blocked" not in headers["x-ctxwarden-actions"]
    assert completion.choices[0].message.content.startswith("Here is the routine")
    fake.reply(content="The Eiffel Tower has 1,710 steps to the top.")
    completion, headers = ask(client, messages=[{"role": "user", "content": "How many steps does the Eiffel Tower have?"}])
    assert "poisoning.blocked" in headers["x-ctxwarden-actions"]


def test_code_blocks_are_left_out_of_the_claims_and_a_piece_may_start_inside_one():
    assert outside_code(CODE_ANSWER).split() == "Start it like this: Then open the page in a browser.".split()
    assert outside_code("listen(fd, 3);\n```\nThen it runs.", in_code=True).strip() == "Then it runs."
    assert outside_code("int port = 9090;", in_code=True) == ""
    assert outside_code("No code here.") == "No code here."


@pytest.mark.parametrize("stream", [False, True])
def test_through_the_server_code_in_an_answer_is_not_judged_and_its_prose_still_is(fake, start_proxy, stream):
    proxy = start_proxy(poisoning())
    load_kb(proxy, [SERVER])
    client = openai_client(proxy)
    question = [{"role": "user", "content": "How do I start the billing server?"}]
    fake.reply(content=CODE_ANSWER)
    assert passes_whole(client, question, CODE_ANSWER, stream)
    fake.reply(content="The billing server listens on port 9090.")
    _, headers = ask(client, messages=[{"role": "user", "content": "Which port does the billing server listen on?"}])
    assert "poisoning.blocked" in headers["x-ctxwarden-actions"]
