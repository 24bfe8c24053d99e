"""Units of measure: one table for every reader of quantities (the answer checker's slots and the
clash detector's typed values), so "64 gigs" and "5 quarts" mean the same thing to both.

Each unit maps to (dimension, factor to the dimension's base unit); two quantities compare only
within a dimension, after scaling.
"""

from __future__ import annotations

UNITS: dict[str, tuple[str, float]] = {}
for _names, _dim, _factor in (
    ("mm millimetre millimetres millimeter millimeters", "length", 1e-3),
    ("cm centimetre centimetres centimeter centimeters", "length", 1e-2),
    ("m metre metres meter meters", "length", 1.0),
    ("km kilometre kilometres kilometer kilometers", "length", 1e3),
    ("in inch inches", "length", 0.0254), ("ft foot feet", "length", 0.3048),
    ("yd yard yards", "length", 0.9144), ("mi mile miles", "length", 1609.344),
    ("sqft sq.ft ft2 ft²", "area", 0.09290304), ("m2 m² sqm", "area", 1.0),
    ("acre acres", "area", 4046.8564224), ("ha hectare hectares", "area", 1e4),
    ("mg milligram milligrams", "mass", 1e-6), ("g gram grams", "mass", 1e-3),
    ("kg kilogram kilograms kilo kilos", "mass", 1.0), ("t tonne tonnes ton tons", "mass", 1e3),
    ("lb lbs pound pounds", "mass", 0.45359237), ("oz ounce ounces", "mass", 0.0283495),
    ("ms millisecond milliseconds", "time", 1e-3), ("s sec secs second seconds", "time", 1.0),
    ("min mins minute minutes", "time", 60.0), ("h hr hrs hour hours", "time", 3600.0),
    ("day days", "time", 86400.0), ("week weeks", "time", 604800.0),
    ("month months", "time", 2629800.0), ("year years yr yrs", "time", 31557600.0),
    ("decade decades", "time", 315576000.0), ("century centuries", "time", 3155760000.0),
    ("% percent per cent", "ratio", 0.01),
    ("$ usd dollar dollars", "usd", 1.0), ("€ eur euro euros", "eur", 1.0), ("£ gbp", "gbp", 1.0),
    ("kb kilobyte kilobytes", "bytes", 1e3), ("mb megabyte megabytes meg megs", "bytes", 1e6),
    ("gb gigabyte gigabytes gig gigs", "bytes", 1e9), ("tb terabyte terabytes", "bytes", 1e12),
    ("kib", "bytes", 1024.0), ("mib", "bytes", 1024.0 ** 2), ("gib", "bytes", 1024.0 ** 3), ("tib", "bytes", 1024.0 ** 4),
    ("l litre litres liter liters", "volume", 1.0), ("ml millilitre millilitres milliliter milliliters", "volume", 1e-3),
    ("qt quart quarts", "volume", 0.946353), ("gal gallon gallons", "volume", 3.785411784),
    ("pint pints", "volume", 0.473176), ("cup cups", "volume", 0.2365882),
    ("°c celsius", "celsius", 1.0), ("°f fahrenheit", "fahrenheit", 1.0),
    ("km/h kph", "speed", 1 / 3.6), ("mph", "speed", 0.44704),
    ("hz hertz", "frequency", 1.0), ("khz", "frequency", 1e3), ("mhz", "frequency", 1e6), ("ghz", "frequency", 1e9),
    ("w watt watts", "power", 1.0), ("kw kilowatt kilowatts", "power", 1e3),
    ("v volt volts", "voltage", 1.0), ("mah", "charge", 1.0),
):
    for _name in _names.split():
        UNITS[_name] = (_dim, _factor)

# Two-word units, read as one ("30 square feet" = "30 sq ft")
PHRASES = {"square feet": "sqft", "square foot": "sqft", "sq ft": "sqft", "sq. ft.": "sqft", "sq. ft": "sqft",
           "square metres": "m2", "square meters": "m2", "square metre": "m2", "square meter": "m2", "sq m": "m2"}
