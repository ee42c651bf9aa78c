"""Operations: sensor, schedule, executor and the definitions that wire them."""
