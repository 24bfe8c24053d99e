from tests.conftest import openai_client, policies_off

def test_plain(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    client = openai_client(proxy)
    r = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == "You said: hi"
    s = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi there"}], stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in s if c.choices)
    assert text == "You said: hi there"
