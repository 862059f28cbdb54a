"""Published label definitions the shipped maps are checked against (beam_pipeline/core/masks/shipped/).

* Cityscapes: the label table of cityscapesScripts, imported from the ``cityscapesscripts`` package itself
  (PyPI, pinned in requirements-tests-nodeps.txt), never copied here.
* CamVid: the 32 RGB label colours of the database's ``label_colors.txt`` (Brostow, Fauqueur and
  Cipolla, "Semantic object classes in video", 2008; the same table is datumaro's ``CamvidLabelMap``),
  and the grouping of the 32 classes into the 11 that SegNet trains on (Badrinarayanan et al., as
  MathWorks' ``camvidPixelLabelIDs`` lists it). Both are facts of the dataset, written out below by
  name; no package ships them.
* PASCAL VOC 2012: the 20 object classes and background of the development kit's documentation (devkit_doc.pdf,
  section 3; index 255 is "void", the border of objects and difficult regions).
* Oxford-IIIT Pet: the trimap codes of the dataset's README (1 foreground, 2 background, 3 not classified).
* ADE20K (ADEChallengeData2016): the 150 classes of objectInfo150 in value order, as
  ``published_data/ade20k_classes.json`` (copied from detectron2's builtin_meta.py, its source named there).
* COCO panoptic 2017: the 133 categories of panopticapi's ``panoptic_coco_categories.json``, copied whole as
  ``published_data/panoptic_coco_categories.json``; the 80 thing categories are those with ``isthing`` 1.
"""

import json
from pathlib import Path

from cityscapesscripts.helpers.labels import labels as CITYSCAPES_LABELS  # noqa: F401 - re-exported

_DATA = Path(__file__).parent / "published_data"
VOC_CLASSES = ("background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
               "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
               "tvmonitor")
VOC_VOID = 255
PET_TRIMAP = {1: "foreground (the pet)", 2: "background", 3: "not classified (the border)"}
ADE20K_CLASSES = tuple(json.loads((_DATA / "ade20k_classes.json").read_text())["classes"])
COCO_PANOPTIC_CATEGORIES = tuple(json.loads((_DATA / "panoptic_coco_categories.json").read_text())["categories"])
COCO_THING_CATEGORIES = tuple(c for c in COCO_PANOPTIC_CATEGORIES if c["isthing"] == 1)

CAMVID_LABEL_COLORS = {
    "Animal": (64, 128, 64), "Archway": (192, 0, 128), "Bicyclist": (0, 128, 192), "Bridge": (0, 128, 64),
    "Building": (128, 0, 0), "Car": (64, 0, 128), "CartLuggagePram": (64, 0, 192), "Child": (192, 128, 64),
    "Column_Pole": (192, 192, 128), "Fence": (64, 64, 128), "LaneMkgsDriv": (128, 0, 192),
    "LaneMkgsNonDriv": (192, 0, 64), "Misc_Text": (128, 128, 64), "MotorcycleScooter": (192, 0, 192),
    "OtherMoving": (128, 64, 64), "ParkingBlock": (64, 192, 128), "Pedestrian": (64, 64, 0), "Road": (128, 64, 128),
    "RoadShoulder": (128, 128, 192), "Sidewalk": (0, 0, 192), "SignSymbol": (192, 128, 128), "Sky": (128, 128, 128),
    "SUVPickupTruck": (64, 128, 192), "TrafficCone": (0, 0, 64), "TrafficLight": (0, 64, 64), "Train": (192, 64, 128),
    "Tree": (128, 128, 0), "Truck_Bus": (192, 128, 192), "Tunnel": (64, 0, 64), "VegetationMisc": (192, 192, 0),
    "Void": (0, 0, 0), "Wall": (64, 192, 0),
}

# SegNet's 11 classes, in their order, and the CamVid classes each groups; Void is not a class.
CAMVID_SEGNET_GROUPS = (
    ("Sky", ("Sky",)),
    ("Building", ("Bridge", "Building", "Wall", "Tunnel", "Archway")),
    ("Pole", ("Column_Pole", "TrafficCone")),
    ("Road", ("Road", "LaneMkgsDriv", "LaneMkgsNonDriv")),
    ("Pavement", ("Sidewalk", "ParkingBlock", "RoadShoulder")),
    ("Tree", ("Tree", "VegetationMisc")),
    ("SignSymbol", ("SignSymbol", "Misc_Text", "TrafficLight")),
    ("Fence", ("Fence",)),
    ("Car", ("Car", "SUVPickupTruck", "Truck_Bus", "Train", "OtherMoving")),
    ("Pedestrian", ("Pedestrian", "Child", "CartLuggagePram", "Animal")),
    ("Bicyclist", ("Bicyclist", "MotorcycleScooter")),
)
