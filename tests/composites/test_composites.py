"""TestPipeline tests of each composite, covering every output (rejects included)."""

import io
import json

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from PIL import Image

from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.records import PairRef
from beam_pipeline.core.selection import parse_split
from beam_pipeline.stages.discover import ReadCorpus
from beam_pipeline.stages.select import SelectSubset
from beam_pipeline.stages.specs import LISTING, PAIRED, CheckSpec, DiscoverSpec, SelectSpec, ShuffleSpec, WriteSpec
from beam_pipeline.stages.validate import DeduplicatePairs, ValidatePairs
from beam_pipeline.stages.write import WriteShards


def png(array):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


IMAGE = np.full((4, 6, 3), 90, dtype=np.uint8)
MASK = np.array([[0, 1, 1, 0, 0, 0]] * 4, dtype=np.uint8)


CHECK = CheckSpec("segmentation", Limits(num_classes=2), max_file_bytes=10**6)


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "masks").mkdir()
    for stem in ("a", "b", "lonely"):
        (tmp_path / "images" / f"{stem}.png").write_bytes(png(IMAGE))
    for stem in ("a", "b", "stray"):
        (tmp_path / "masks" / f"{stem}.png").write_bytes(png(MASK))
    (tmp_path / "masks" / "b.png").write_bytes(png(MASK[:2]))         # size mismatch
    return tmp_path


def _key(item):
    return item.key


def _reason(outcome):
    return outcome.key, outcome.reason


def test_read_corpus_joins_on_key_and_reports_orphans(folder):
    with TestPipeline() as p:
        pairs, rejected = p | ReadCorpus(DiscoverSpec(str(folder), PAIRED, mask_template="masks/{stem}.png"))
        assert_that(pairs | "Keys" >> beam.Map(_key),
                    equal_to(["images/a.png|masks/a.png", "images/b.png|masks/b.png"]), label="Pairs")
        assert_that(rejected | "Reasons" >> beam.Map(_reason),
                    equal_to([("images/lonely.png|masks/lonely.png", "orphan_image"),
                              ("|masks/stray.png", "orphan_mask")]), label="Orphans")


def test_validate_pairs_outputs_valid_and_rejected(folder):
    refs = [PairRef(key=s, source_id=f"images/{s}.png", image=str(folder / "images" / f"{s}.png"),
                    mask=str(folder / "masks" / f"{s}.png")) for s in ("a", "b", "lonely")]
    with TestPipeline() as p:
        valid, rejected, _ = p | beam.Create(refs) | ValidatePairs(CHECK)
        assert_that(valid | "Summaries" >> beam.Map(lambda v: (v.ref.key, v.class_pixels, v.height, v.width)),
                    equal_to([("a", (16, 8), 4, 6)]), label="Valid")
        assert_that(rejected | "Reasons" >> beam.Map(_reason),
                    equal_to([("b", "size_mismatch"), ("lonely", "missing_file")]), label="Rejected")


@pytest.mark.parametrize("through_files", [False, True], ids=["beam_shuffles", "file_shuffles"])
def test_select_subset_filter_cap_and_split(tmp_path, through_files):
    refs = [PairRef(key=f"k{i}", source_id=f"images/{i}.png", image=f"/i/{i}.png", mask=f"/m/{i}.png",
                    metadata=(("source", "camA" if i % 2 else "camB"), ("split", "train" if i < 8 else "")))
            for i in range(10)]
    from beam_pipeline.core.filter_expr import parse_filter
    spec = SelectSpec(parse_split("column"), filter=parse_filter("source == 'camA'"), exclude=("images/1.png",),
                      max_examples=3)
    shuffle = ShuffleSpec(folder=str(tmp_path / "shuffle"), buckets=3) if through_files else ShuffleSpec()
    with TestPipeline() as p:
        kept, rejected, filtered = p | beam.Create(refs) | SelectSubset(spec, shuffle)
        # camA: 1 3 5 7 9; 1 excluded; 3 of {3, 5, 7, 9} kept by rank; 9 (if kept) has no split.
        assert_that(kept | "Count" >> beam.combiners.Count.Globally() | beam.Map(lambda n: n <= 3),
                    equal_to([True]), label="AtMostThree")
        assert_that(kept | "Splits" >> beam.Map(lambda r: r.split), lambda splits: all(s == "train" for s in splits),
                    label="SplitsFromColumn")
        # The inputs filtered out are counted per reason, not passed on one by one.
        assert_that(filtered, equal_to([(("filtered", "filter_expression"), 5), (("filtered", "exclude_glob"), 1),
                                        (("filtered", "max_examples"), 1)]), label="Filtered")
        assert_that(rejected | "Rejected" >> beam.Map(lambda o: (o.status, o.reason)),
                    lambda found: all(item == ("rejected", "bad_manifest_row") for item in found), label="NoSplit")
        outcomes = ((kept | "OneEachKept" >> beam.Map(lambda _: 1)),
                    (rejected | "OneEachRejected" >> beam.Map(lambda _: 1)),
                    (filtered | "FilteredNumbers" >> beam.Map(lambda kv: kv[1])))
        assert_that(outcomes | beam.Flatten() | "Total" >> beam.CombineGlobally(sum), equal_to([10]),
                    label="NothingLost")


@pytest.mark.parametrize("through_files", [False, True], ids=["beam_shuffles", "file_shuffles"])
def test_deduplicate_keeps_smallest_key(folder, through_files):
    refs = [PairRef(key=k, source_id=k, image=str(folder / "images" / "a.png"), mask=str(folder / "masks" / "a.png"))
            for k in ("z", "m", "c")]
    shuffle = ShuffleSpec(folder=str(folder / "shuffle"), buckets=2) if through_files else ShuffleSpec()
    with TestPipeline() as p:
        valid, _, _ = p | beam.Create(refs) | ValidatePairs(CHECK)
        unique, duplicates = valid | DeduplicatePairs(shuffle)
        assert_that(unique | "Kept" >> beam.Map(lambda v: v.ref.key), equal_to(["c"]), label="Kept")
        assert_that(duplicates | "Dups" >> beam.Map(_reason), equal_to([("m", "duplicate"), ("z", "duplicate")]),
                    label="Duplicates")


def _lines_of(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()


@pytest.mark.parametrize("through_files", [False, True], ids=["beam_shuffles", "file_shuffles"])
def test_write_shards_reads_back_with_tf_data(folder, through_files):
    refs = [PairRef(key=f"k{i}", source_id=f"s{i}", image=str(folder / "images" / "a.png"),
                    mask=str(folder / "masks" / "a.png"), split="train") for i in range(12)]
    spec = WriteSpec(str(folder / "out"), CHECK, target_shard_bytes=200)
    shuffle = ShuffleSpec(folder=str(folder / "shuffle"), buckets=4) if through_files else ShuffleSpec()
    with TestPipeline() as p:
        valid, _, _ = p | beam.Create(refs) | ValidatePairs(CHECK)
        shards, changed = valid | WriteShards(spec, refusals=p | "NoRefusals" >> beam.Create([]), shuffle=shuffle)
        # beside each shard, its part of the class index (JSON lines) and its keys file (a line per record)
        assert_that(shards | "IndexParts" >> beam.Map(lambda s: str(folder / "out" / s.class_index))
                    | "IndexLines" >> beam.FlatMap(_lines_of)
                    | "IndexedClasses" >> beam.Map(lambda line: json.loads(line)["class"])
                    | beam.combiners.Count.PerElement(), equal_to([(0, 12), (1, 12)]), label="ClassIndex")
        assert_that(shards | "KeysFiles" >> beam.Map(lambda s: (len(_lines_of(str(folder / "out" / s.keys))), s.records))
                    | "KeysPerRecord" >> beam.Filter(lambda pair: pair[0] != pair[1]), equal_to([]), label="Keys")
        assert_that(shards | beam.Map(lambda s: s.records) | beam.CombineGlobally(sum), equal_to([12]), label="All")
        assert_that(changed, equal_to([]), label="NoneChanged")
    files = sorted((folder / "out").glob("train-*.tfrecord"))          # straight into the version folder
    assert len(files) > 1
    ids = {tf.train.Example.FromString(r.numpy()).features.feature["image/source_id"].bytes_list.value[0]
           for r in tf.data.TFRecordDataset([str(f) for f in files])}
    assert ids == {f"s{i}".encode() for i in range(12)}


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_read_corpus_from_manifest_files(tmp_path, suffix):
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq
    table = pa.table({"image": ["images/a.png", "../escape.png", None, "/abs/elsewhere.png"],
                      "mask": ["masks/a.png", "masks/e.png", "masks/n.png", "masks/x.png"],
                      "capture_year": [2021, 2019, 2020, 2022]})
    path = tmp_path / f"manifest{suffix}"
    if suffix == ".csv":
        pa_csv.write_csv(table, path)
    elif suffix == ".parquet":
        pq.write_table(table, path)
    else:
        import json
        path.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))
    with TestPipeline() as p:
        pairs, rejected = p | ReadCorpus(DiscoverSpec(str(path), LISTING))
        assert_that(pairs | "Pairs" >> beam.Map(lambda r: (r.image, r.mask, r.meta()["capture_year"])),
                    equal_to([(str(tmp_path / "images/a.png"), str(tmp_path / "masks/a.png"),
                               "2021" if suffix == ".csv" else 2021)]), label="Pairs")
        assert_that(rejected | "Reasons" >> beam.Map(lambda o: o.reason),
                    equal_to(["path_outside_root", "bad_manifest_row", "path_outside_root"]), label="Rejected")


def test_records_through_files_are_the_records_beam_moves(tmp_path):
    """Grouped and held through files: the same records and groups as Beam's shuffles, and no file left
    behind once they are read."""
    from beam_pipeline.stages.shuffle import GroupPackedByKey, Materialize
    records = [PairRef(key=f"k{i}", source_id=f"s{i}", image=f"/i/{i}.png", split="train") for i in range(50)]
    keyed = [(f"g{i % 7}", record) for i, record in enumerate(records)]
    folder = tmp_path / "shuffle"
    shuffle = ShuffleSpec(folder=str(folder), buckets=5)
    with TestPipeline() as p:
        grouped = (p | "Keyed" >> beam.Create(keyed) | GroupPackedByKey(shuffle)
                   | "Sorted" >> beam.Map(lambda kv: (kv[0], sorted(r.key for r in kv[1]))))
        expected = {}
        for key, record in keyed:
            expected.setdefault(key, []).append(record.key)
        assert_that(grouped, equal_to([(k, sorted(v)) for k, v in expected.items()]), label="Grouped")
        held = p | "ToHold" >> beam.Create(records) | Materialize(shuffle)
        assert_that(held | "HeldKeys" >> beam.Map(lambda r: r.key), equal_to([r.key for r in records]),
                    label="Held")
    assert [path for path in folder.rglob("*") if path.is_file()] == []


@pytest.mark.parametrize("through_files", [True, False])
def test_several_inputs_grouped_together_are_the_groups_of_their_flatten(tmp_path, through_files):
    """Two keyed inputs made in different stages, grouped by one GroupPackedByKey, give each key every value of both
    (as Beam's Flatten then GroupByKey would), through files or through Beam's own shuffle; no file left behind."""
    from beam_pipeline.stages.shuffle import GroupPackedByKey
    records = [PairRef(key=f"k{i}", source_id=f"s{i}", image=f"/i/{i}.png", split="train") for i in range(40)]
    first = [(f"g{i % 6}", ("pair", record)) for i, record in enumerate(records)]
    second = [(f"g{i}", ("label", i * 10)) for i in range(3, 9)]        # g6..g8: keys only the second input has
    folder = tmp_path / "shuffle"
    shuffle = ShuffleSpec(folder=str(folder), buckets=4) if through_files else ShuffleSpec()
    expected = {}
    for key, value in first + second:
        expected.setdefault(key, []).append(repr(value))
    with TestPipeline() as p:
        a = p | "First" >> beam.Create(first) | "Reshuffled" >> beam.Reshuffle()
        b = p | "Second" >> beam.Create(second)
        grouped = ((a, b) | GroupPackedByKey(shuffle)
                   | "Sorted" >> beam.Map(lambda kv: (kv[0], sorted(repr(value) for value in kv[1]))))
        assert_that(grouped, equal_to([(key, sorted(values)) for key, values in expected.items()]))
    assert [path for path in folder.rglob("*") if path.is_file()] == []


@pytest.mark.parametrize("through_files", [True, False])
def test_several_inputs_held_together_are_their_flatten_and_never_cross_the_runner(tmp_path, monkeypatch,
                                                                                   through_files):
    """Two inputs made in different stages, held by one Materialize, are the records of their Flatten, through files
    or not. Through files, no bundle the runner hands a worker carries the records themselves (only paths): a
    Flatten's stage, the control, hands one worker every record at once, which Beam's DirectRunner engine holds in
    the launcher's memory (docs/scale.md)."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    from beam_pipeline.stages.shuffle import Materialize
    sent = {}
    send = fn_runner.BundleManager._send_input_to_worker

    def counted(manager, bundle_id, transform_id, byte_streams):
        byte_streams = list(byte_streams)
        sent[transform_id] = max(sent.get(transform_id, 0), sum(len(chunk) for chunk in byte_streams))
        return send(manager, bundle_id, transform_id, byte_streams)

    monkeypatch.setattr(fn_runner.BundleManager, "_send_input_to_worker", counted)
    records = [PairRef(key=f"k{i}", source_id=f"s{i}" + "x" * 1000, image=f"/i/{i}.png", split="train")
               for i in range(300)]
    folder = tmp_path / "shuffle"
    shuffle = ShuffleSpec(folder=str(folder), buckets=4) if through_files else ShuffleSpec()
    with TestPipeline(runner="DirectRunner") as p:
        a = p | "First" >> beam.Create(records[:200]) | "Reshuffled" >> beam.Reshuffle()
        b = p | "Second" >> beam.Create(records[200:])
        held = (a, b) | "Held" >> Materialize(shuffle)
        assert_that(held | "HeldKeys" >> beam.Map(lambda r: r.key), equal_to([r.key for r in records]))
        flattened = (p | "Third" >> beam.Create(records[:200]) | "Again" >> beam.Reshuffle(),
                     p | "Fourth" >> beam.Create(records[200:])) | "Control" >> beam.Flatten()
        _ = flattened | "Used" >> beam.Map(lambda r: r.key)
    held_sends = [size for transform, size in sent.items() if transform.startswith("Held/")]
    assert max(sent[transform] for transform in sent if transform.startswith("Control")) > 300 * 1000
    if through_files:
        assert held_sends and max(held_sends) < 300 * 1000 / 10, sent
    assert [path for path in folder.rglob("*") if path.is_file()] == []


def test_counts_that_do_not_reconcile_at_publishing_end_the_run_with_one_line(tmp_path):
    """PublishOutputs fed inputs whose counts do not add up (ten discovered, nothing accounted for) leaves
    no pending manifest, and the launcher's read of the result is one RunFailed line naming the counts."""
    from beam_pipeline.core.failures import RunFailed
    from beam_pipeline.stages.publish import PublishOutputs, read_result
    from beam_pipeline.stages.specs import PublishSpec
    data_dir = tmp_path / "runs" / "v"
    with TestPipeline() as p:
        nothing = p | "Nothing" >> beam.Create([])
        discovered = p | "Discovered" >> beam.Create([10])
        _ = ((nothing, p | "NoOutcomes" >> beam.Create([]), p | "NoFiltered" >> beam.Create([]), discovered,
              p | "NoStats" >> beam.Create([]), p | "NoTransform" >> beam.Create([]),
              p | "NoRefusals" >> beam.Create([]), p | "NoLineage" >> beam.Create([]))
             | PublishOutputs(PublishSpec(str(data_dir), "segmentation", num_classes=2), {}, {}))
    assert not (data_dir / "_pending_manifest.json").exists()
    with pytest.raises(RunFailed) as raised:
        read_result(str(data_dir))
    message = str(raised.value)
    assert message.startswith("the counts do not reconcile at PublishOutputs: discovered 10 but accounted for 0")
    assert "\n" not in message and "Nothing was published" in message
