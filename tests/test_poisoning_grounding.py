"""Grounding mode (`poisoning.grounding: covered_subjects`): claims about a subject the KB covers
must be backed by it. Units against a real Chroma KB, then end to end through the real proxy."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from ctxwarden.policies.poisoning.assess import Assessment, apply_judge, assess_local
from ctxwarden.policies.poisoning.check import (
    CONTRADICTED,
    SUPPORTED,
    UNSUPPORTED,
    UNVERIFIABLE,
    ClaimCheck,
    LocalChecker,
)
from ctxwarden.policies.poisoning.grounding import Grounder
from ctxwarden.policies.poisoning.kb import Document, KnowledgeBase
from ctxwarden.policies.poisoning.policy import PoisoningConfig
from ctxwarden.policies.poisoning.scores import accuracy
from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.embeddings import WordLlamaEmbedder
from ctxwarden.proxy.storage import ChromaStore
from tests.conftest import openai_client, policies_off

X200 = "The Acme X200 router supports Wi-Fi 6. The Acme X200 router has 4 Ethernet ports. The Acme X200 router is made by Acme Networks."
Z9 = "The Zeta Z9 phone is made by Zeta Mobile. The Zeta Z9 phone has a 6.1 inch screen. The Zeta Z9 phone supports fast charging."
CATALOGUE = [Document("x200", X200, {}), Document("z9", Z9, {})]


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> KnowledgeBase:
    store = ChromaStore(StorageConfig(path=str(tmp_path_factory.mktemp("kb"))))
    base = KnowledgeBase(store, WordLlamaEmbedder())
    base.add(CATALOGUE)
    return base


def worst(kb: KnowledgeBase, text: str, conversation: tuple[str, ...] = (), grounding: bool = True) -> ClaimCheck | None:
    return assess_local(text, kb, LocalChecker(), "", 4, list(conversation), Grounder() if grounding else None).worst


def test_an_unbacked_claim_about_a_covered_subject_is_unsupported_only_in_grounding_mode(kb):
    text = "The Acme X200 router comes with a Bluetooth 5 radio."
    found = worst(kb, text)
    assert found is not None and found.verdict == UNSUPPORTED and found.kind == "unsupported_entity"
    assert 0.5 <= found.confidence < 0.8  # a new feature, worded unlike the KB: held for review
    assert found.evidence in X200 and found.evidence_id.startswith("x200#")  # what the KB does say about it
    assert worst(kb, text, grounding=False) is None  # the default: what the KB does not say passes


@pytest.mark.parametrize("text", [
    "The Zeta Z9 phone supports fast charging.",  # backed
    "The Colosseum is located in Rome.",  # not a subject the KB covers
    "Hello! The Acme X200 router is a good choice.",  # nothing asserted beyond the subject
])
def test_backed_and_uncovered_claims_pass_in_grounding_mode(kb, text):
    assert worst(kb, text) is None


def test_what_the_conversation_said_is_grounded(kb):
    text = "The Acme X200 router works with your Netgear N300."
    assert worst(kb, text, ("I have a Netgear N300 at home.",)) is None  # the user's own words
    assert worst(kb, text).verdict == UNSUPPORTED


def test_confidence_follows_how_specific_the_unbacked_part_is(kb):
    name = worst(kb, "The Zeta Z9 phone supports Bluetooth.")
    date = worst(kb, "The Zeta Z9 phone was released in 2019.")
    kb.add([Document("mesh", "Mesh networking links several routers into one network.", {})])  # "mesh" becomes a KB term
    try:
        term = worst(kb, "The Zeta Z9 phone supports mesh.")
    finally:
        kb.delete("mesh")
    assert "mesh" not in kb.index.lexicon and worst(kb, "The Zeta Z9 phone supports mesh.") is None  # gone with its document
    assert (name.kind, date.kind, term.kind) == ("unsupported_entity", "unsupported_date", "unsupported_term")
    assert name.confidence >= 0.8  # worded like a KB sentence, one name swapped in: blocked
    assert name.confidence > date.confidence > term.confidence >= 0.5


def test_a_pronoun_subject_is_resolved_from_the_conversation_with_less_confidence(kb):
    named = worst(kb, "The Acme X200 router comes with a Bluetooth 5 radio.")
    resolved = worst(kb, "It also comes with a Bluetooth 5 radio.", ("Tell me about the Acme X200 router.",))
    assert resolved.verdict == UNSUPPORTED and resolved.evidence in X200
    assert resolved.confidence < named.confidence
    assert worst(kb, "It also comes with a Bluetooth 5 radio.") is None  # nothing named before: no subject


def test_a_contradiction_keeps_its_verdict_and_evidence_in_grounding_mode(kb):
    found = worst(kb, "The Acme X200 router has 8 Ethernet ports.")
    assert found.verdict == CONTRADICTED and found.kind == "wrong_number"
    assert found.evidence == "The Acme X200 router has 4 Ethernet ports."


class _Judge:
    def __init__(self, verdict: str) -> None:
        self.verdict = verdict

    async def check(self, claim, passages, exchange=None) -> ClaimCheck:
        return ClaimCheck(claim.text, self.verdict, 0.9, passages[0].text, passages[0].id, checker="judge")


@pytest.mark.parametrize("judge_says, final", [(UNVERIFIABLE, UNSUPPORTED), (SUPPORTED, SUPPORTED), (CONTRADICTED, CONTRADICTED)])
async def test_the_judge_settles_unsure_unsupported_claims(kb, judge_says, final):
    assessment: Assessment = assess_local("The Acme X200 router comes with a Bluetooth 5 radio.", kb, LocalChecker(),
                                          "", 4, [], Grounder())
    await apply_judge(assessment, _Judge(judge_says), "unsure", 0.8, 0.8)
    assert assessment.judged == 1
    assert assessment.checks[0].verdict == final  # "the facts do not say" is what unsupported means: it stays


def test_unsupported_claims_lower_accuracy_and_bad_modes_are_refused():
    checks = [ClaimCheck("a", SUPPORTED, 1.0), ClaimCheck("b", UNSUPPORTED, 0.6)]
    assert accuracy(checks) == pytest.approx((1.0 + 0.4) / 2)
    assert PoisoningConfig().grounding == "off"
    with pytest.raises(ValidationError, match="grounding"):
        PoisoningConfig(grounding="everything")


# ----------------------------------------------------------------------------- end to end

ADMIN_KEY = "grounding-admin-key"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}


def _proxy(start_proxy, monkeypatch, grounding: str):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    policies = policies_off("poisoning")
    policies["poisoning"] = {"enabled": True, "grounding": grounding}
    proxy = start_proxy({"policies": policies})
    r = httpx.post(f"{proxy.url}/admin/kb/documents", headers=AUTH,
                   json={"documents": [d.as_dict() for d in CATALOGUE]})
    assert r.status_code == 200, r.text
    return proxy


def _ask(proxy, question: str = "What does the Acme X200 router come with?"):
    raw = openai_client(proxy).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}])
    return raw.parse().choices[0], raw.headers


def test_grounding_on_holds_or_blocks_unbacked_claims_and_off_lets_them_pass(fake, start_proxy, monkeypatch):
    unbacked = "The Acme X200 router comes with a Bluetooth 5 radio."
    swapped = "Great pick! The Zeta Z9 phone supports Bluetooth."
    grounded = _proxy(start_proxy, monkeypatch, "covered_subjects")

    fake.reply(content=unbacked)
    held, headers = _ask(grounded)
    assert held.finish_reason == "content_filter" and held.message.content.startswith("[ctxwarden] This answer is held")
    assert f'the claim "{unbacked}" may not be backed by the knowledge base' in held.message.content
    assert "The Acme X200 router" in held.message.content.split("which says about this:")[1]
    assert "poisoning.quarantined" in headers["x-ctxwarden-actions"]
    qid = held.message.content.split("quarantine id ")[1].split(")")[0]
    pending = httpx.get(f"{grounded.url}/admin/quarantine", params={"status": "pending"}, headers=AUTH).json()["data"]
    assert [(i["id"], i["text"], i["type"]) for i in pending] == [(qid, unbacked, "unsupported_entity")]

    fake.reply(content=swapped)
    blocked, headers = _ask(grounded, "Which phone should I buy?")
    assert blocked.finish_reason == "content_filter" and "hallucination detected" in blocked.message.content
    assert '"The Zeta Z9 phone supports Bluetooth." is not backed by the knowledge base' in blocked.message.content
    assert "poisoning.blocked" in headers["x-ctxwarden-actions"]

    fake.reply(content="The Acme X200 router supports Wi-Fi 6 and has 4 Ethernet ports.")
    fine, _ = _ask(grounded)
    assert fine.finish_reason == "stop" and fine.message.content.endswith("4 Ethernet ports.")

    default = _proxy(start_proxy, monkeypatch, "off")
    for content in (unbacked, swapped):
        fake.reply(content=content)
        passed, headers = _ask(default)
        assert passed.finish_reason == "stop" and passed.message.content == content
        assert "poisoning" not in headers["x-ctxwarden-actions"]
