--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: lite_agent_corpus; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA lite_agent_corpus;


--
-- Name: append_events(text, bigint, text, text[], boolean[], text, integer); Type: FUNCTION; Schema: lite_agent_corpus; Owner: -
--

CREATE FUNCTION lite_agent_corpus.append_events(p_id text, p_expected bigint, p_prefix text, p_tails text[], p_anchors boolean[], p_title_json text, p_turns integer) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_head bigint;
    v_count integer := cardinality(p_tails);
BEGIN
    LOOP
        UPDATE "lite_agent_corpus".sessions s
        SET head = s.head + v_count, mtime = clock_timestamp(),
            title_json = coalesce(s.title_json, p_title_json), turns = s.turns + p_turns
        WHERE s.id = p_id
        RETURNING s.head - v_count INTO v_head;
        EXIT WHEN FOUND;
        INSERT INTO "lite_agent_corpus".sessions AS s (id, head, mtime, title_json, turns)
        VALUES (p_id, v_count, clock_timestamp(), p_title_json, p_turns)
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
            v_head := 0;
            EXIT;
        END IF;
        -- Another transaction created the session meanwhile: its row is there now.
    END LOOP;
    IF p_expected IS NOT NULL AND p_expected <> v_head THEN
        RAISE EXCEPTION USING ERRCODE = 'LA409', MESSAGE = 'expected head mismatch',
            DETAIL = v_head::text;
    END IF;
    INSERT INTO "lite_agent_corpus".events (session_id, seq, anchor, body)
    SELECT p_id, v_head + t.n, t.anchor, p_prefix || (v_head + t.n)::text || t.tail
    FROM unnest(p_tails, p_anchors) WITH ORDINALITY AS t(tail, anchor, n);
    RETURN v_head + v_count;
END
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: blob_refs; Type: TABLE; Schema: lite_agent_corpus; Owner: -
--

CREATE TABLE lite_agent_corpus.blob_refs (
    scope text NOT NULL,
    owner text NOT NULL,
    hash text NOT NULL,
    touched timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: blobs; Type: TABLE; Schema: lite_agent_corpus; Owner: -
--

CREATE TABLE lite_agent_corpus.blobs (
    hash text NOT NULL,
    size bigint NOT NULL,
    data bytea NOT NULL,
    created timestamp with time zone DEFAULT now() NOT NULL,
    used timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT blobs_hash_check CHECK ((hash ~ '^[0-9a-f]{64}$'::text))
);


--
-- Name: events; Type: TABLE; Schema: lite_agent_corpus; Owner: -
--

CREATE TABLE lite_agent_corpus.events (
    session_id text NOT NULL,
    seq bigint NOT NULL,
    anchor boolean DEFAULT false NOT NULL,
    body text NOT NULL,
    CONSTRAINT events_seq_check CHECK ((seq > 0))
);


--
-- Name: schema_version; Type: TABLE; Schema: lite_agent_corpus; Owner: -
--

CREATE TABLE lite_agent_corpus.schema_version (
    version integer NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: sessions; Type: TABLE; Schema: lite_agent_corpus; Owner: -
--

CREATE TABLE lite_agent_corpus.sessions (
    id text NOT NULL,
    head bigint DEFAULT 0 NOT NULL,
    mtime timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    title_json text,
    turns integer DEFAULT 0 NOT NULL,
    CONSTRAINT sessions_head_check CHECK ((head >= 0))
);


--
-- Name: task_lists; Type: TABLE; Schema: lite_agent_corpus; Owner: -
--

CREATE TABLE lite_agent_corpus.task_lists (
    id text NOT NULL,
    data text NOT NULL,
    mtime timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


--
-- Name: tombstones; Type: TABLE; Schema: lite_agent_corpus; Owner: -
--

CREATE TABLE lite_agent_corpus.tombstones (
    id text NOT NULL,
    deleted timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


--
-- Data for Name: blob_refs; Type: TABLE DATA; Schema: lite_agent_corpus; Owner: -
--

INSERT INTO lite_agent_corpus.blob_refs VALUES ('postgresql://127.0.0.1:5432/test#lite_agent_corpus', 'corpus-session', 'eab5e1e6e9c30a97ef498e89c7069cdedeae12b4ba319309fe1b3a883e4aa08f', '2026-12-01 15:37:31.584638+00');
INSERT INTO lite_agent_corpus.blob_refs VALUES ('postgresql://127.0.0.1:5432/test#lite_agent_corpus', 'corpus-session', 'ae4b3280e56e2faf83f414a6e3dabe9d5fbe18976544c05fed121accb85b53fc', '2026-12-01 15:37:31.660503+00');
INSERT INTO lite_agent_corpus.blob_refs VALUES ('postgresql://127.0.0.1:5432/test#lite_agent_corpus', 'corpus-session', 'bd3698b64b9f7abfd029cf9f5fc9d32daeb3f86d27893ff6329b89d6c3677381', '2026-12-01 15:37:31.840402+00');
INSERT INTO lite_agent_corpus.blob_refs VALUES ('postgresql://127.0.0.1:5432/test#lite_agent_corpus', 'corpus-session', '81f6d33070e45730bc707059a3f52c3671274fb03cf9717d278e476392cfded6', '2026-12-01 15:37:31.899887+00');
INSERT INTO lite_agent_corpus.blob_refs VALUES ('postgresql://127.0.0.1:5432/test#lite_agent_corpus', 'corpus-session', 'd8d3e7614b3c682cd4602e8b31651ad799cc2fe874f9a37aa61cddd0f1e20955', '2026-12-01 15:37:32.213855+00');
INSERT INTO lite_agent_corpus.blob_refs VALUES ('postgresql://127.0.0.1:5432/test#lite_agent_corpus', 'corpus-session', '8726624309bcc64fa0c36eeb49485a4858ebf911157f12d293fb2336b227ff75', '2026-12-01 15:37:32.330699+00');


--
-- Data for Name: blobs; Type: TABLE DATA; Schema: lite_agent_corpus; Owner: -
--

INSERT INTO lite_agent_corpus.blobs VALUES ('eab5e1e6e9c30a97ef498e89c7069cdedeae12b4ba319309fe1b3a883e4aa08f', 20, '\x23204e6f7465730a0a6669727374206c696e650a', '2026-12-01 15:37:31.584638+00', '2026-12-01 15:37:31.584638+00');
INSERT INTO lite_agent_corpus.blobs VALUES ('ae4b3280e56e2faf83f414a6e3dabe9d5fbe18976544c05fed121accb85b53fc', 3, '\x000102', '2026-12-01 15:37:31.626801+00', '2026-12-01 15:37:31.626801+00');
INSERT INTO lite_agent_corpus.blobs VALUES ('bd3698b64b9f7abfd029cf9f5fc9d32daeb3f86d27893ff6329b89d6c3677381', 28, '\x23204e6f7465730a0a6669727374206c696e652c206564697465640a', '2026-12-01 15:37:31.840402+00', '2026-12-01 15:37:31.840402+00');
INSERT INTO lite_agent_corpus.blobs VALUES ('81f6d33070e45730bc707059a3f52c3671274fb03cf9717d278e476392cfded6', 13, '\x6d61646520627920626173680a', '2026-12-01 15:37:31.85656+00', '2026-12-01 15:37:31.85656+00');
INSERT INTO lite_agent_corpus.blobs VALUES ('d8d3e7614b3c682cd4602e8b31651ad799cc2fe874f9a37aa61cddd0f1e20955', 17, '\x312e20726561640a322e2077726974650a', '2026-12-01 15:37:32.213855+00', '2026-12-01 15:37:32.213855+00');
INSERT INTO lite_agent_corpus.blobs VALUES ('8726624309bcc64fa0c36eeb49485a4858ebf911157f12d293fb2336b227ff75', 25, '\x312e20726561640a322e2077726974650a332e20736869700a', '2026-12-01 15:37:32.330699+00', '2026-12-01 15:37:32.330699+00');


--
-- Data for Name: events; Type: TABLE DATA; Schema: lite_agent_corpus; Owner: -
--

INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 1, true, '{"v":1,"seq":1,"ts":"2026-12-01T15:37:32.795282+00:00","type":"user","content":"create notes.md and raw.bin","origin":"user","checkpoint":true}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 2, false, '{"v":1,"seq":2,"ts":"2026-12-01T15:37:32.795282+00:00","type":"assistant","content":[{"type":"tool_use","id":"toolu_01DCrdASMH5DVxhmfSLeUnvt","name":"write_file","input":{"path":"notes.md","content":"# Notes\n\nfirst line\n"}},{"type":"tool_use","id":"toolu_01HIQS2AiB6GTmWNYEWGbz6s","name":"bash","input":{"command":"printf ''\\000\\001\\002'' > raw.bin"}}],"usage":{"input_tokens":1769,"output_tokens":72,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"stop_reason":"tool_use","model":"scripted"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 3, false, '{"v":1,"seq":3,"ts":"2026-12-01T15:37:32.795282+00:00","type":"file_snapshot","path":"notes.md","before":null,"after":"eab5e1e6e9c30a97ef498e89c7069cdedeae12b4ba319309fe1b3a883e4aa08f","tool_use_id":"toolu_01DCrdASMH5DVxhmfSLeUnvt"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 4, false, '{"v":1,"seq":4,"ts":"2026-12-01T15:37:32.795282+00:00","type":"file_snapshot","path":"raw.bin","before":null,"after":"ae4b3280e56e2faf83f414a6e3dabe9d5fbe18976544c05fed121accb85b53fc","tool_use_id":"toolu_01HIQS2AiB6GTmWNYEWGbz6s","tool":"bash"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 5, false, '{"v":1,"seq":5,"ts":"2026-12-01T15:37:32.795282+00:00","type":"tool_result","tool_use_id":"toolu_01DCrdASMH5DVxhmfSLeUnvt","content":"created notes.md (3 lines)","is_error":false}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 6, false, '{"v":1,"seq":6,"ts":"2026-12-01T15:37:32.795282+00:00","type":"tool_result","tool_use_id":"toolu_01HIQS2AiB6GTmWNYEWGbz6s","content":"(no output)\n[exit code 0]\n(files changed by this command, recorded for checkpoint restore: created raw.bin)","is_error":false}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 7, false, '{"v":1,"seq":7,"ts":"2026-12-01T15:37:32.795282+00:00","type":"assistant","content":[{"type":"text","text":"Created notes.md; raw.bin written by the shell."}],"usage":{"input_tokens":1927,"output_tokens":19,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"stop_reason":"end_turn","model":"scripted"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 8, true, '{"v":1,"seq":8,"ts":"2026-12-01T15:37:33.063685+00:00","type":"user","content":"edit notes.md and make a folder with the shell","origin":"user","checkpoint":true}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 9, false, '{"v":1,"seq":9,"ts":"2026-12-01T15:37:33.063685+00:00","type":"assistant","content":[{"type":"tool_use","id":"toolu_018TjHM6PNT0j9PVqYkMSVqs","name":"edit_file","input":{"path":"notes.md","old_string":"first line","new_string":"first line, edited"}},{"type":"tool_use","id":"toolu_01gMZR56FVU6P6I4JxNjQJWG","name":"bash","input":{"command":"mkdir -p out && printf ''made by bash\\n'' > out/log.txt"}}],"usage":{"input_tokens":1979,"output_tokens":84,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"stop_reason":"tool_use","model":"scripted"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 10, false, '{"v":1,"seq":10,"ts":"2026-12-01T15:37:33.063685+00:00","type":"file_snapshot","path":"notes.md","before":"eab5e1e6e9c30a97ef498e89c7069cdedeae12b4ba319309fe1b3a883e4aa08f","after":"bd3698b64b9f7abfd029cf9f5fc9d32daeb3f86d27893ff6329b89d6c3677381","tool_use_id":"toolu_018TjHM6PNT0j9PVqYkMSVqs"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 11, false, '{"v":1,"seq":11,"ts":"2026-12-01T15:37:33.063685+00:00","type":"file_snapshot","path":"out/log.txt","before":null,"after":"81f6d33070e45730bc707059a3f52c3671274fb03cf9717d278e476392cfded6","tool_use_id":"toolu_01gMZR56FVU6P6I4JxNjQJWG","tool":"bash"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 12, false, '{"v":1,"seq":12,"ts":"2026-12-01T15:37:33.063685+00:00","type":"tool_result","tool_use_id":"toolu_018TjHM6PNT0j9PVqYkMSVqs","content":"edited notes.md: replaced 1 occurrence (first at line 3)","is_error":false}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 13, false, '{"v":1,"seq":13,"ts":"2026-12-01T15:37:33.063685+00:00","type":"tool_result","tool_use_id":"toolu_01gMZR56FVU6P6I4JxNjQJWG","content":"(no output)\n[exit code 0]\n(files changed by this command, recorded for checkpoint restore: created out/log.txt)","is_error":false}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 14, false, '{"v":1,"seq":14,"ts":"2026-12-01T15:37:33.063685+00:00","type":"assistant","content":[{"type":"text","text":"Edited; out/log.txt made."}],"usage":{"input_tokens":2156,"output_tokens":13,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"stop_reason":"end_turn","model":"scripted"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 15, false, '{"v":1,"seq":15,"ts":"2026-12-01T15:37:33.063685+00:00","type":"compaction","summary":"The summary of the conversation so far: notes.md and out/log.txt exist.","through_seq":14,"before":2177,"after":1798}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 16, true, '{"v":1,"seq":16,"ts":"2026-12-01T15:37:33.364752+00:00","type":"user","content":"delete raw.bin and write plan.txt","origin":"user","checkpoint":true}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 17, false, '{"v":1,"seq":17,"ts":"2026-12-01T15:37:33.364752+00:00","type":"assistant","content":[{"type":"tool_use","id":"toolu_01qdoJZ4xEMWu4qKsemoygVH","name":"delete_file","input":{"path":"raw.bin"}},{"type":"tool_use","id":"toolu_01uJZYw3cuvA4U3XVByJbbku","name":"write_file","input":{"path":"plan.txt","content":"1. read\n2. write\n"}}],"usage":{"input_tokens":1813,"output_tokens":66,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"stop_reason":"tool_use","model":"scripted"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 18, false, '{"v":1,"seq":18,"ts":"2026-12-01T15:37:33.364752+00:00","type":"file_snapshot","path":"raw.bin","before":"ae4b3280e56e2faf83f414a6e3dabe9d5fbe18976544c05fed121accb85b53fc","after":null,"tool_use_id":"toolu_01qdoJZ4xEMWu4qKsemoygVH"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 19, false, '{"v":1,"seq":19,"ts":"2026-12-01T15:37:33.364752+00:00","type":"file_snapshot","path":"plan.txt","before":null,"after":"d8d3e7614b3c682cd4602e8b31651ad799cc2fe874f9a37aa61cddd0f1e20955","tool_use_id":"toolu_01uJZYw3cuvA4U3XVByJbbku"}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 20, false, '{"v":1,"seq":20,"ts":"2026-12-01T15:37:33.364752+00:00","type":"tool_result","tool_use_id":"toolu_01qdoJZ4xEMWu4qKsemoygVH","content":"deleted raw.bin (3 bytes)","is_error":false}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 21, false, '{"v":1,"seq":21,"ts":"2026-12-01T15:37:33.364752+00:00","type":"tool_result","tool_use_id":"toolu_01uJZYw3cuvA4U3XVByJbbku","content":"created plan.txt (2 lines)","is_error":false}');
INSERT INTO lite_agent_corpus.events VALUES ('corpus-session', 22, false, '{"v":1,"seq":22,"ts":"2026-12-01T15:37:33.364752+00:00","type":"assistant","content":[{"type":"text","text":"Deleted raw.bin, wrote plan.txt."}],"usage":{"input_tokens":1944,"output_tokens":15,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"stop_reason":"end_turn","model":"scripted"}');


--
-- Data for Name: schema_version; Type: TABLE DATA; Schema: lite_agent_corpus; Owner: -
--

INSERT INTO lite_agent_corpus.schema_version VALUES (1, '2026-12-01 15:37:31.034044+00');
INSERT INTO lite_agent_corpus.schema_version VALUES (2, '2026-12-01 15:37:31.034044+00');
INSERT INTO lite_agent_corpus.schema_version VALUES (3, '2026-12-01 15:37:31.034044+00');
INSERT INTO lite_agent_corpus.schema_version VALUES (4, '2026-12-01 15:37:31.034044+00');


--
-- Data for Name: sessions; Type: TABLE DATA; Schema: lite_agent_corpus; Owner: -
--

INSERT INTO lite_agent_corpus.sessions VALUES ('corpus-session', 22, '2026-12-01 15:37:33.66072+00', '"create notes.md and raw.bin"', 3);


--
-- Data for Name: task_lists; Type: TABLE DATA; Schema: lite_agent_corpus; Owner: -
--



--
-- Data for Name: tombstones; Type: TABLE DATA; Schema: lite_agent_corpus; Owner: -
--



--
-- Name: blob_refs blob_refs_pkey; Type: CONSTRAINT; Schema: lite_agent_corpus; Owner: -
--

ALTER TABLE ONLY lite_agent_corpus.blob_refs
    ADD CONSTRAINT blob_refs_pkey PRIMARY KEY (scope, owner, hash);


--
-- Name: blobs blobs_pkey; Type: CONSTRAINT; Schema: lite_agent_corpus; Owner: -
--

ALTER TABLE ONLY lite_agent_corpus.blobs
    ADD CONSTRAINT blobs_pkey PRIMARY KEY (hash);


--
-- Name: events events_pkey; Type: CONSTRAINT; Schema: lite_agent_corpus; Owner: -
--

ALTER TABLE ONLY lite_agent_corpus.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (session_id, seq);


--
-- Name: schema_version schema_version_pkey; Type: CONSTRAINT; Schema: lite_agent_corpus; Owner: -
--

ALTER TABLE ONLY lite_agent_corpus.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (version);


--
-- Name: sessions sessions_pkey; Type: CONSTRAINT; Schema: lite_agent_corpus; Owner: -
--

ALTER TABLE ONLY lite_agent_corpus.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (id);


--
-- Name: task_lists task_lists_pkey; Type: CONSTRAINT; Schema: lite_agent_corpus; Owner: -
--

ALTER TABLE ONLY lite_agent_corpus.task_lists
    ADD CONSTRAINT task_lists_pkey PRIMARY KEY (id);


--
-- Name: tombstones tombstones_pkey; Type: CONSTRAINT; Schema: lite_agent_corpus; Owner: -
--

ALTER TABLE ONLY lite_agent_corpus.tombstones
    ADD CONSTRAINT tombstones_pkey PRIMARY KEY (id);


--
-- Name: blob_refs_hash_idx; Type: INDEX; Schema: lite_agent_corpus; Owner: -
--

CREATE INDEX blob_refs_hash_idx ON lite_agent_corpus.blob_refs USING btree (hash);


--
-- Name: sessions_mtime_idx; Type: INDEX; Schema: lite_agent_corpus; Owner: -
--

CREATE INDEX sessions_mtime_idx ON lite_agent_corpus.sessions USING btree (mtime DESC);


--
-- PostgreSQL database dump complete
--


